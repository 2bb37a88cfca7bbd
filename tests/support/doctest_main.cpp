// the doctest main, in its own translation unit (it is the slow one to compile)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
