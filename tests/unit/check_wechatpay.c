#include "config.h"
#include <check.h>
#include "suites.h"
Suite *
suite_wechatpay(void)
{
	return suite_create("wechatpay");
}
