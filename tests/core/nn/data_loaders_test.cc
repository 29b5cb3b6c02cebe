// Tests of core/nn/data/loaders.h (to be written).
#include "cohort/core/nn/data/loaders.h"

#include <doctest/doctest.h>
