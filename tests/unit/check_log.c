#include "config.h"
#include <check.h>
#include "suites.h"
Suite *
suite_log(void)
{
	return suite_create("log");
}
