#include "config.h"
#include <check.h>
#include "suites.h"
Suite *
suite_http(void)
{
	return suite_create("http");
}
