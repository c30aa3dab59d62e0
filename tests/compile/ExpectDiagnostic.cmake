# cmake -DCXX=... -DSOURCE=snippet.cpp -DINCLUDE_DIRS="a|b" -DEXPECT=regex -P ExpectDiagnostic.cmake
#
# Proves that a mistake in user code is refused at the user's own line. SOURCE is a snippet
# with its mistakes inside `#ifndef UCP_CORRECT` and each mistaken line marked `// MISTAKE`;
# under UCP_CORRECT the same snippet, mistakes fixed, must compile (so the test notices when
# the snippet rots); without it, every marked line must get an error (-Werror) and the output
# must match EXPECT (the attribute or concept that caught it).
string(REPLACE "|" ";" include_dirs "${INCLUDE_DIRS}")
set(flags -std=c++20 -fsyntax-only -Wall -Wextra -Werror)
foreach(dir IN LISTS include_dirs)
  list(APPEND flags -I${dir})
endforeach()

execute_process(COMMAND ${CXX} ${flags} -DUCP_CORRECT ${SOURCE}
  RESULT_VARIABLE correct_status OUTPUT_VARIABLE correct_out ERROR_VARIABLE correct_out)
if(NOT correct_status EQUAL 0)
  message(FATAL_ERROR "the corrected snippet does not compile:\n${correct_out}")
endif()

execute_process(COMMAND ${CXX} ${flags} ${SOURCE}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(status EQUAL 0)
  message(FATAL_ERROR "the snippet's mistakes compiled without an error")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "no diagnostic matches \"${EXPECT}\":\n${out}")
endif()

get_filename_component(name ${SOURCE} NAME)
file(STRINGS ${SOURCE} lines)
set(number 0)
set(marked 0)
foreach(line IN LISTS lines)
  math(EXPR number "${number} + 1")
  if(line MATCHES "// MISTAKE")
    math(EXPR marked "${marked} + 1")
    if(NOT out MATCHES "${name}:${number}:[0-9]+: error: ")
      message(FATAL_ERROR "no error at ${name}:${number} (${line}):\n${out}")
    endif()
  endif()
endforeach()
if(marked EQUAL 0)
  message(FATAL_ERROR "${name} marks no line with // MISTAKE")
endif()
message(STATUS "${marked} mistake(s) refused at their own lines")
