# cmake -DSOURCE_DIR=... -DOUTPUT=... -P git_description.cmake: writes OUTPUT, a header defining
# ATOLL_GIT_DESCRIPTION as `git describe --always --dirty` of SOURCE_DIR ("unknown" outside a git
# checkout), only when that changed, so an unchanged tree recompiles nothing.
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --tags
                OUTPUT_VARIABLE description OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR description STREQUAL "")
  set(description "unknown")
endif()
set(text "#pragma once\n// Generated at every build by cmake/git_description.cmake.\n#define ATOLL_GIT_DESCRIPTION \"${description}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
