// Tests of core/nn/ops/normalization.h (to be written).
#include "cohort/core/nn/ops/normalization.h"

#include <doctest/doctest.h>
