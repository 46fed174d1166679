# webhooks/alipay/module.mk: the Alipay module's part of the build (listed in
# webhooks/providers.mk).  Its receiver is common/main.c compiled for
# pn_provider_alipay; its man page is a link to paynotify-receiver(8).
PN_PROVIDERS += alipay
sbin_PROGRAMS += paynotify-alipay
paynotify_alipay_SOURCES = common/main.c
paynotify_alipay_CPPFLAGS = $(AM_CPPFLAGS) -DPN_PROVIDER=pn_provider_alipay
paynotify_alipay_LDADD = $(PN_LIBS)
