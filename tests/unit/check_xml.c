#include "config.h"
#include <check.h>
#include "suites.h"
Suite *
suite_xml(void)
{
	return suite_create("xml");
}
