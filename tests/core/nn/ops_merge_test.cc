// Tests of core/nn/ops/merge.h (to be written).
#include "cohort/core/nn/ops/merge.h"

#include <doctest/doctest.h>
