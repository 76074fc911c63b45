# What a pip build (scikit-build-core, pyproject.toml) installs into the fragless package,
# all in the install component python_package, relative to the package directory:
#   lib/libfragless.so, lib/libfragless_torch.so, bin/fragless-stats, _build_info.py
# Invariant: the package is self-contained apart from torch and the CUDA runtime: the
# libraries find each other through RUNPATH $ORIGIN, fragless-stats through $ORIGIN/../lib,
# and _build_info.py names the torch the libraries were built against (python -m fragless).
if(NOT TARGET fragless_torch)
  message(FATAL_ERROR "fragless: the Python package needs libfragless_torch, which needs torch 2.11 to 2.15 "
                      "in the environment pip installs into (install torch first; build with "
                      "pip install --no-build-isolation .)")
endif()
set(_package_component COMPONENT python_package)
# One libfragless in the wheel: a wheel stores a symbolic link as a second copy of its
# target, so the package's build gives libfragless no version suffix (libfragless.so, its own
# SONAME, the name libfragless_torch records as its dependency) and installs that one file.
set_property(TARGET fragless PROPERTY VERSION)
set_property(TARGET fragless PROPERTY SOVERSION)
install(TARGETS fragless LIBRARY DESTINATION lib ${_package_component})
install(TARGETS fragless_torch LIBRARY DESTINATION lib ${_package_component})
install(TARGETS fragless-stats RUNTIME DESTINATION bin ${_package_component})
set(FRAGLESS_PACKAGE_VERSION "${PROJECT_VERSION}")
configure_file("${CMAKE_SOURCE_DIR}/cmake/python_build_info.py.in"
               "${CMAKE_BINARY_DIR}/python_package/_build_info.py" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/python_package/_build_info.py" DESTINATION . ${_package_component})
