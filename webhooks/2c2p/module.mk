# webhooks/2c2p/module.mk: the 2C2P module's part of the build (listed in
# webhooks/providers.mk).  Its receiver is common/main.c compiled for
# pn_provider_2c2p; its man page is a link to paynotify-receiver(8).
PN_PROVIDERS += 2c2p
sbin_PROGRAMS += paynotify-2c2p
paynotify_2c2p_SOURCES = common/main.c
paynotify_2c2p_CPPFLAGS = $(AM_CPPFLAGS) -DPN_PROVIDER=pn_provider_2c2p
paynotify_2c2p_LDADD = $(PN_LIBS)
