// fragless-micro: the micro benchmark on its own (same as `fragless-bench micro`).
#include "micro.hpp"

int main(int argc, char** argv) { return fragless::bench::run_micro(argc - 1, argv + 1); }
