# webhooks/providers.mk: the providers, one line each (HACKING.md "Adding a
# provider").  Makefile.am includes it; the registries, the receivers, and
# the tests' and tools' lists (tests/lib/pnproviders.py, scripts/providers.sh)
# are made from these lines.  The order is the documentation's and
# check-config's.
include $(srcdir)/webhooks/alipay/module.mk
include $(srcdir)/webhooks/stripe/module.mk
include $(srcdir)/webhooks/wechatpay/module.mk
include $(srcdir)/webhooks/2c2p/module.mk
