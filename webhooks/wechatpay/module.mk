# webhooks/wechatpay/module.mk: the WeChat Pay module's part of the build (listed in
# webhooks/providers.mk).  Its receiver is common/main.c compiled for
# pn_provider_wechatpay; its man page is a link to paynotify-receiver(8).
PN_PROVIDERS += wechatpay
sbin_PROGRAMS += paynotify-wechatpay
paynotify_wechatpay_SOURCES = common/main.c
paynotify_wechatpay_CPPFLAGS = $(AM_CPPFLAGS) -DPN_PROVIDER=pn_provider_wechatpay
paynotify_wechatpay_LDADD = $(PN_LIBS)
