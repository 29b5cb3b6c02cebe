#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {}  // namespace cohort::data
