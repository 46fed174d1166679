# webhooks/stripe/module.mk: the Stripe module's part of the build (listed in
# webhooks/providers.mk).  Its receiver is common/main.c compiled for
# pn_provider_stripe; its man page is a link to paynotify-receiver(8).
PN_PROVIDERS += stripe
sbin_PROGRAMS += paynotify-stripe
paynotify_stripe_SOURCES = common/main.c
paynotify_stripe_CPPFLAGS = $(AM_CPPFLAGS) -DPN_PROVIDER=pn_provider_stripe
paynotify_stripe_LDADD = $(PN_LIBS)
