// The owner of the test programs' precompiled header (ucp_add_test in cmake/UcpHelpers.cmake):
// CMake builds a precompiled header while compiling a target's sources, and this translation
// unit, which defines nothing, is the only source of the target that every test reuses it from.
