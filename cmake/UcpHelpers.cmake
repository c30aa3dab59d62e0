# Functions every CMakeLists.txt of UCP uses. Included once by the top-level CMakeLists.txt.
#
#   ucp_add_library(<layer> [sources...])   a layer library: target ucp_<layer>, alias and
#                                           exported name ucp::<layer>; header-only without sources
#   ucp_add_executable(<name> sources... [LIBS libs...])   a program in bin/
#   ucp_add_test(<name> SOURCES ... LIBS ... [LABELS ...] [TIMEOUT s])   a GoogleTest binary
#   ucp_add_test_groups()                   the target ucp_threads_tests: the `threads` tests
#
# Compiler warnings are a property of UCP's own targets (the internal ucp_build_flags target),
# never of the directory, so nothing leaks into a project that adds UCP as a subdirectory,
# and nothing of it is exported to consumers.

add_library(ucp_build_flags INTERFACE)
target_compile_options(ucp_build_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor> $<$<COMPILE_LANGUAGE:CXX>:-Wold-style-cast>
  # GCC 12 reports -Wrestrict on plain std::string concatenation (GCC bug 105651, fixed in 13).
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<BOOL:${UCP_WERROR}>:-Werror>)
if(NOT UCP_SANITIZE STREQUAL "" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12's -Wmaybe-uninitialized misfires on instrumented code (e.g. inside <regex>).
  target_compile_options(ucp_build_flags INTERFACE -Wno-maybe-uninitialized)
endif()

# Shared libraries: SONAME libucp_<layer>.so.<SOVERSION>. Before 1.0 every minor release may
# break the ABI, so the SOVERSION is MAJOR.MINOR (0.1); from 1.0 on it is MAJOR.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(UCP_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(UCP_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

function(ucp_add_library layer)
  set(target ucp_${layer})
  if(ARGN)
    add_library(${target} ${ARGN})
    set_target_properties(${target} PROPERTIES
      OUTPUT_NAME ucp_${layer}
      VERSION ${PROJECT_VERSION}
      SOVERSION ${UCP_SOVERSION})
    target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:ucp_build_flags>)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "SHARED_LIBRARY")
      # Exports: the ucp namespace only (cmake/ucp.map); every library states what it needs.
      target_link_options(${target} PRIVATE
        -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/ucp.map -Wl,--no-undefined)
      set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/ucp.map)
      # The layers find each other where they are installed, in whatever prefix.
      set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
    endif()
  else()
    add_library(${target} INTERFACE)
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
  add_library(ucp::${layer} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY UCP_LAYER_TARGETS ${target})
endfunction()

# ucp::ucp: every layer, for users who do not care which ones they need.
function(ucp_add_umbrella_library)
  get_property(layers GLOBAL PROPERTY UCP_LAYER_TARGETS)
  add_library(ucp INTERFACE)
  target_link_libraries(ucp INTERFACE ${layers})
  set_target_properties(ucp PROPERTIES EXPORT_NAME ucp)
  add_library(ucp::ucp ALIAS ucp)
endfunction()

function(ucp_add_executable name)
  cmake_parse_arguments(E "" "" "LIBS" ${ARGN})
  add_executable(${name} ${E_UNPARSED_ARGUMENTS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${UCP_BIN_DIR})
  target_link_libraries(${name} PRIVATE ${E_LIBS} ucp_build_flags)
endfunction()

# What every test source is compiled with (the precompiled header's owner too: a precompiled
# header is only used by a compilation with the same flags and definitions).
function(ucp_test_compile_settings target)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(${target} PRIVATE UCP_SOURCE_DIR="${PROJECT_SOURCE_DIR}" UCP_BIN_DIR="${UCP_BIN_DIR}")
  # GCC 12 forgets, for headers read from a precompiled header, that they are system headers,
  # and reports its known std::string false positives in char_traits.h (-Warray-bounds,
  # -Wstringop-overflow, -Wstringop-overread) as errors in the tests; without it they do not.
  target_compile_options(${target} PRIVATE
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread>)
endfunction()

# The test programs share one precompiled header per build tree: GoogleTest and the standard
# headers most tests include. Parsing gtest.h alone is about half of what compiling a small
# test costs, and the tree has some 120 test sources, compiled again in each sanitizer tree.
# The owner is a target of its own so that a tree that builds only some tests (the TSan one
# builds the `threads` tests) still has it.
function(ucp_add_test_precompiled_header)
  if(TARGET ucp_test_pch)
    return()
  endif()
  add_library(ucp_test_pch OBJECT ${PROJECT_SOURCE_DIR}/tests/support/PrecompiledHeader.cpp)
  target_link_libraries(ucp_test_pch PRIVATE ucp_build_flags GTest::gtest)
  ucp_test_compile_settings(ucp_test_pch)
  target_precompile_headers(ucp_test_pch PRIVATE <gtest/gtest.h> <string> <vector> <thread>
                            <chrono> <memory> <atomic>)
endfunction()

# ucp_add_test(NAME SOURCES src... LIBS lib... [LABELS l...] [TIMEOUT s] [BOTH_BACKENDS]);
# nothing when UCP_BUILD_TESTS is off, so that layer CMakeLists need no condition of their own.
# BOTH_BACKENDS runs the binary twice: NAME on the default backend (io_uring where it can run)
# and NAME_epoll with UCP_TEST_BACKEND=epoll (tests/support/Backends.h), for tests whose loops
# come from test::make_loop or test::backend_under_test rather than a backend parameter.
function(ucp_add_test name)
  if(NOT UCP_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "BOTH_BACKENDS" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  ucp_add_test_precompiled_header()
  add_executable(${name} ${T_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_LIBS} ucp_build_flags GTest::gtest GTest::gtest_main)
  ucp_test_compile_settings(${name})
  target_precompile_headers(${name} REUSE_FROM ucp_test_pch)
  add_test(NAME ${name} COMMAND ${name})
  # ucp_threads_tests builds these alone (make test-tsan runs nothing else).
  if("threads" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY UCP_THREADS_TEST_TARGETS ${name})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
  if(T_BOTH_BACKENDS)
    add_test(NAME ${name}_epoll COMMAND ${name})
    set_tests_properties(${name}_epoll PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
                         ENVIRONMENT UCP_TEST_BACKEND=epoll)
  endif()
endfunction()

# Headers, libraries, the CMake package (ucpConfig.cmake, ucpConfigVersion.cmake,
# ucpTargets.cmake) and ucp.pc. Every library ucp_add_library made is installed and exported.
function(ucp_install)
  include(CMakePackageConfigHelpers)
  get_property(layers GLOBAL PROPERTY UCP_LAYER_TARGETS)
  set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ucp)

  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ucp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT development FILES_MATCHING PATTERN "*.h")
  install(FILES ${PROJECT_BINARY_DIR}/include/ucp/version.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ucp COMPONENT development)
  install(TARGETS ${layers} ucp EXPORT ucpTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                  NAMELINK_COMPONENT development
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  install(EXPORT ucpTargets NAMESPACE ucp:: DESTINATION ${cmake_dir} COMPONENT development)

  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ucpConfig.cmake.in
    ${PROJECT_BINARY_DIR}/ucpConfig.cmake INSTALL_DESTINATION ${cmake_dir})
  # Before 1.0 a minor release may break the API: find_package(ucp 0.1) accepts 0.1.x only.
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(compatibility SameMinorVersion)
  else()
    set(compatibility SameMajorVersion)
  endif()
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/ucpConfigVersion.cmake
    COMPATIBILITY ${compatibility})
  install(FILES ${PROJECT_BINARY_DIR}/ucpConfig.cmake ${PROJECT_BINARY_DIR}/ucpConfigVersion.cmake
          DESTINATION ${cmake_dir} COMPONENT development)

  # ucp.pc: -l flags in link order (a layer before the layers it uses), and a prefix found
  # relative to the .pc file, so an installed tree can be moved (or installed with --prefix).
  # Static libraries (the default): what they use goes into Requires and Libs, so that the
  # plain `pkg-config --libs ucp` links; shared ones keep liburing, zlib and OpenSSL private.
  set(libs "")
  foreach(target IN LISTS layers)
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      set(libs "-l${target} ${libs}")
    endif()
  endforeach()
  string(STRIP "${libs}" libs)
  set(UCP_PC_LIBS "${libs} -pthread")
  set(private_requires "liburing >= 2.3, zlib, libssl >= 3, libcrypto >= 3")
  if(BUILD_SHARED_LIBS)
    set(UCP_PC_REQUIRES "fmt")
    set(UCP_PC_REQUIRES_PRIVATE "Requires.private: ${private_requires}")
  else()
    set(UCP_PC_REQUIRES "fmt, ${private_requires}")
    set(UCP_PC_REQUIRES_PRIVATE "")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(UCP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  else()
    file(RELATIVE_PATH up /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
    string(REGEX REPLACE "/$" "" up "${up}")
    set(UCP_PC_PREFIX "\${pcfiledir}/${up}")
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/ucp.pc.in ${PROJECT_BINARY_DIR}/ucp.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/ucp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT development)

  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
                ${PROJECT_SOURCE_DIR}/CHANGELOG.md
          DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT development)

  # Every program of bin/: the servers (component server, what deploy/Dockerfile installs),
  # their config file as an example beside the docs, and the clients (component tools).
  foreach(program proactor_test http_server)
    if(TARGET ${program})
      install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
    endif()
  endforeach()
  if(TARGET proactor_test)
    install(FILES ${PROJECT_SOURCE_DIR}/config/ucp.conf DESTINATION ${CMAKE_INSTALL_DOCDIR}
            COMPONENT server)
  endif()
  foreach(program test_client bench_client ws_bench_client ws_fanout_client)
    if(TARGET ${program})
      install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
    endif()
  endforeach()
endfunction()

# ucp_threads_tests: every test labelled `threads` and what it links, for the TSan pass of
# make test, which runs those only. Called once, after every layer and test directory.
function(ucp_add_test_groups)
  get_property(threads_tests GLOBAL PROPERTY UCP_THREADS_TEST_TARGETS)
  if(threads_tests)
    add_custom_target(ucp_threads_tests)
    add_dependencies(ucp_threads_tests ${threads_tests})
  endif()
endfunction()
