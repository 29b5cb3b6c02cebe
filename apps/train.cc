// train: the Cohort training program (mpirun -np 8 build/bin/train).
#include <cstdio>

#include "cohort/core/app.h"
#include "cohort/core/flags.h"

COHORT_DEFINE_string(model, "mlp", "model to train: mlp, cnn or small_cnn");

namespace {

int Main(int, char**) {
  std::printf("model %s\n", FLAGS_model.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
