#include "cohort/core/nn/ops/embedding.h"

namespace cohort {}  // namespace cohort
