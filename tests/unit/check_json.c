#include "config.h"
#include <check.h>
#include "suites.h"
Suite *
suite_json(void)
{
	return suite_create("json");
}
