// Tests of core/nn/ops/pooling.h (to be written).
#include "cohort/core/nn/ops/pooling.h"

#include <doctest/doctest.h>
