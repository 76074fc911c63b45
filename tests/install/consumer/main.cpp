// Allocates and frees through the installed libfragless's C ABI and checks the pointer.
#include <fragless/fragless.h>

#include <cstdio>
#include <cstring>

int main() {
  void* block = fragless_malloc(1 << 20, 0, nullptr);
  if (block == nullptr) {
    std::printf("consumer: fragless_malloc failed: %s\n", fragless_last_error());
    return 1;
  }
  std::memset(block, 0x5a, 1 << 20);  // simcuda's device memory is host-addressable
  fragless_free(block, 1 << 20, 0, nullptr);
  std::printf("consumer: ok\n");
  return 0;
}
