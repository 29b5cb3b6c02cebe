// Tests of core/nn/ops/elementwise.h (to be written).
#include "cohort/core/nn/ops/elementwise.h"

#include <doctest/doctest.h>
