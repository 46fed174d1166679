#include "config.h"
#include <check.h>
#include "suites.h"
Suite *
suite_arena(void)
{
	return suite_create("arena");
}
