# Installs libraries, headers, tools and a CMake package so that another project can
#   find_package(fragless) and link fragless::fragless.
# The package alone (library, headers, CMake files) is the install component cmake_package
# (`cmake --install BUILD --component cmake_package`, after building only `fragless`).
include(CMakePackageConfigHelpers)
if(TARGET fragless)
  install(TARGETS fragless EXPORT fraglessTargets COMPONENT cmake_package
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY "${CMAKE_SOURCE_DIR}/allocator/include/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT cmake_package)
  install(EXPORT fraglessTargets NAMESPACE fragless:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fragless
    COMPONENT cmake_package)
  configure_package_config_file("${CMAKE_SOURCE_DIR}/cmake/fraglessConfig.cmake.in"
    "${CMAKE_BINARY_DIR}/fraglessConfig.cmake"
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fragless)
  write_basic_package_version_file("${CMAKE_BINARY_DIR}/fraglessConfigVersion.cmake"
    COMPATIBILITY SameMinorVersion)
  install(FILES "${CMAKE_BINARY_DIR}/fraglessConfig.cmake" "${CMAKE_BINARY_DIR}/fraglessConfigVersion.cmake"
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fragless COMPONENT cmake_package)
endif()
