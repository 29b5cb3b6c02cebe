// Tests of core/nn/ops/embedding.h (to be written).
#include "cohort/core/nn/ops/embedding.h"

#include <doctest/doctest.h>
