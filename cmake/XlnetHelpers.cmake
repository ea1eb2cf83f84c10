# Shared compile settings, the LibTorch precompiled header, and test helpers.

# Flags every xlnet target gets.
function(xlnet_set_compile_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(XLNET_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(XLNET_SANITIZE)
    string(REPLACE ";" "," _san "${XLNET_SANITIZE}")
    target_compile_options(${target} PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${_san})
  endif()
  if(XLNET_WITH_CUDA)
    target_compile_definitions(${target} PRIVATE XLNET_WITH_CUDA=1)
  endif()
  if(XLNET_PCH AND TARGET xlnet_pch)
    target_precompile_headers(${target} REUSE_FROM xlnet_pch)
  endif()
endfunction()

# An object library that owns the one LibTorch PCH; other targets reuse it.
function(xlnet_add_pch_target)
  if(NOT XLNET_PCH)
    return()
  endif()
  set(_src ${CMAKE_BINARY_DIR}/xlnet_pch.cc)
  if(NOT EXISTS ${_src})
    file(WRITE ${_src} "// Translation unit that builds the shared precompiled header.\n")
  endif()
  add_library(xlnet_pch OBJECT ${_src})
  target_link_libraries(xlnet_pch PUBLIC torch absl::status absl::statusor)
  target_compile_options(xlnet_pch PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(XLNET_SANITIZE)
    string(REPLACE ";" "," _san "${XLNET_SANITIZE}")
    target_compile_options(xlnet_pch PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer)
  endif()
  if(XLNET_WITH_CUDA)
    target_compile_definitions(xlnet_pch PRIVATE XLNET_WITH_CUDA=1)
  endif()
  target_precompile_headers(xlnet_pch PRIVATE ${PROJECT_SOURCE_DIR}/common/torch_pch.h)
endfunction()

# xlnet_add_library(name SOURCES ... DEPS ...): a static library of one folder.
# Installed (cmake --install) into lib/ and exported as xlnet::<name without
# "xlnet_"> (cmake/packaging.cmake); its headers are installed under
# include/xlnet/, so `#include "model/xlnet.h"` works as in our sources.
function(xlnet_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include/xlnet>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  xlnet_set_compile_options(${name})
  string(REGEX REPLACE "^xlnet_" "" _export_name ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${_export_name})
  install(TARGETS ${name} EXPORT xlnet_cpp_targets
          ARCHIVE DESTINATION lib)
endfunction()

# xlnet_add_tool(verb SOURCES ... DEPS ...): build/bin/xlnet-<verb>.
function(xlnet_add_tool verb)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target xlnet_tool_${verb})
  add_executable(${target} ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME xlnet-${verb})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS})
  xlnet_set_compile_options(${target})
endfunction()

# xlnet_add_test(name SOURCES ... DEPS ...): one GoogleTest binary registered with CTest.
function(xlnet_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    XLNET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    XLNET_BINARY_DIR="${CMAKE_BINARY_DIR}")
  xlnet_set_compile_options(${name})
  # One CTest entry per binary: each process pays LibTorch's load time once,
  # and GoogleTest still reports every case (ctest --output-on-failure).
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "XLNET_LOG_LEVEL=warning" TIMEOUT 900)
endfunction()

# xlnet_add_script_test(name SCRIPT file TIMEOUT seconds [PROPERTIES ...]):
# a test script run as `file BUILD_DIR SOURCE_DIR` that exits 77 when it
# cannot run here (CTest: skipped); PROPERTIES are more test properties.
function(xlnet_add_script_test name)
  cmake_parse_arguments(ARG "" "SCRIPT;TIMEOUT" "PROPERTIES" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${ARG_SCRIPT} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT ${ARG_TIMEOUT} ${ARG_PROPERTIES})
endfunction()

# xlnet_add_bench(name SOURCES ... DEPS ...): build/bin/xlnet-bench-<name>.
function(xlnet_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  string(REPLACE "-" "_" target xlnet_bench_${name})
  add_executable(${target} ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME xlnet-bench-${name})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS})
  xlnet_set_compile_options(${target})
endfunction()

# xlnet_add_script_tool(verb SCRIPT file.py): build/bin/xlnet-<verb>, a copy
# of a Python 3 script (target xlnet_tool_<verb>). Its shebang stays
# `/usr/bin/env python3` when that python3 can import every module in
# IMPORTS; otherwise it names Debian's /usr/bin/python3 if that one can (a
# virtualenv or pyenv python3 first on PATH lacks Debian's packages).
function(xlnet_add_script_tool verb)
  cmake_parse_arguments(ARG "" "SCRIPT" "IMPORTS" ${ARGN})
  # The choice is cached once it works (each check starts Python).
  set(_cache XLNET_SHEBANG_${verb})
  if(NOT ${_cache})
    set(_check "import sys")
    foreach(_module ${ARG_IMPORTS})
      string(APPEND _check "\nimport ${_module}")
    endforeach()
    set(_shebang "")
    foreach(_python "python3" "/usr/bin/python3")
      execute_process(COMMAND ${_python} -c "${_check}"
                      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        if(_python STREQUAL "python3")
          set(_shebang "/usr/bin/env python3")
        else()
          set(_shebang ${_python})
        endif()
        break()
      endif()
    endforeach()
    if(_shebang)
      set(${_cache} ${_shebang} CACHE INTERNAL "shebang of xlnet-${verb}")
    else()
      message(WARNING "xlnet-${verb}: no python3 imports ${ARG_IMPORTS}; "
                      "scripts/setup.sh installs the Debian packages")
    endif()
  endif()
  set(_shebang "${${_cache}}")
  if(NOT _shebang)
    set(_shebang "/usr/bin/env python3")
  endif()
  set(_out ${CMAKE_BINARY_DIR}/bin/xlnet-${verb})
  get_filename_component(_src ${ARG_SCRIPT} ABSOLUTE)
  set(_writer ${PROJECT_SOURCE_DIR}/cmake/write_script.cmake)
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -DSRC=${_src} -DDST=${_out}
            "-DSHEBANG=${_shebang}" -P ${_writer}
    DEPENDS ${_src} ${_writer}
    COMMENT "Writing bin/xlnet-${verb}"
    VERBATIM)
  add_custom_target(xlnet_tool_${verb} ALL DEPENDS ${_out})
endfunction()
