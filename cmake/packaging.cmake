# Installing and packaging (included by the top CMakeLists.txt after every
# library and tool is defined):
#   cmake --install build --prefix P   P/bin/xlnet-*, P/lib/libxlnet_*.a,
#                                      P/lib/xlnet/libxlnet_spm_bridge.so,
#                                      P/include/xlnet/<folder>/*.h,
#                                      P/lib/cmake/xlnet_cpp/,
#                                      P/share/xlnet/configs/*.yaml,
#                                      P/share/doc/xlnet-cpp/{copyright,
#                                      LICENSE} (xlnet-plot:
#                                      tools/CMakeLists.txt)
#   find_package(xlnet_cpp REQUIRED)   xlnet::common, xlnet::config,
#                                      xlnet::model, xlnet::data,
#                                      xlnet::model_io, xlnet::lm,
#                                      xlnet::train,
#                                      xlnet::pretrain, xlnet::finetune
#   cpack -G DEB (in build/)           xlnet-cpp_<version>_<arch>.deb
include(CMakePackageConfigHelpers)

foreach(_dir common config model data_pipeline model_io lm train pretrain
             finetune)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}/
          DESTINATION include/xlnet/${_dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()

# The example configs (configs/README.md), and the licence: Debian's
# machine-readable copyright file (DEP-5, cmake/copyright) and the full
# Apache-2.0 text.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/
        DESTINATION share/xlnet/configs
        FILES_MATCHING PATTERN "*.yaml")
install(FILES ${PROJECT_SOURCE_DIR}/cmake/copyright
              ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION share/doc/xlnet-cpp)

set(_cmake_dir lib/cmake/xlnet_cpp)
install(EXPORT xlnet_cpp_targets NAMESPACE xlnet::
        FILE xlnet_cppTargets.cmake DESTINATION ${_cmake_dir})
set(XLNET_INSTALL_WITH_GLOG ${XLNET_WITH_GLOG})
# Our CUDA kernels' static library links CUDA::cudart.
set(XLNET_INSTALL_WITH_CUDA_KERNELS ${XLNET_CUDA_ATTENTION})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/xlnet_cppConfig.cmake.in
  ${CMAKE_BINARY_DIR}/xlnet_cppConfig.cmake
  INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/xlnet_cppConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/xlnet_cppConfig.cmake
              ${CMAKE_BINARY_DIR}/xlnet_cppConfigVersion.cmake
        DESTINATION ${_cmake_dir})

set(CPACK_PACKAGE_NAME xlnet-cpp)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "XLNet pretraining, fine-tuning and export in C++ on LibTorch")
# The project's commit identity; -DXLNET_DEB_MAINTAINER="Name <mail>" for
# another.
set(XLNET_DEB_MAINTAINER
    "Seed 1de28558 maintainers <maintainers@users.noreply.a-seed-1de28558.example>"
    CACHE STRING "Maintainer field of the .deb (cpack -G DEB)")
set(CPACK_PACKAGE_CONTACT "${XLNET_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Debian 12 package names (scripts/setup.sh): the libraries the tools need
# at run time, the -dev packages find_package(xlnet_cpp) needs, and python3
# for xlnet-plot (which draws with python3-matplotlib; --help runs without).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libtorch-dev, libsentencepiece-dev, libicu-dev, libabsl-dev, libyaml-cpp-dev, nlohmann-json3-dev, zlib1g-dev, libzstd-dev, python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS python3-matplotlib)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
include(CPack)
