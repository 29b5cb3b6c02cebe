#include "cohort/core/nn/ops/normalization.h"

namespace cohort {}  // namespace cohort
