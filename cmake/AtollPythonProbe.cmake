# atoll_python_probe(OUT PACKAGE CODE FIX): runs CODE (Python printing one value a line) with
# ATOLL_TORCH_PYTHON, .venv's interpreter, and sets OUT to the list of lines; stops configure with
# one line naming the interpreter, PACKAGE, Python's error and FIX when it fails. Wheels that carry C++
# libraries (torch: LibTorch; pyarrow: Arrow and Parquet) say where they keep them this way.
function(atoll_python_probe out package code fix)
  execute_process(
    COMMAND "${ATOLL_TORCH_PYTHON}" -W ignore -c "${code}"
    OUTPUT_VARIABLE _probe ERROR_VARIABLE _probe_error RESULT_VARIABLE _probe_status
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _probe_status EQUAL 0)
    string(REGEX MATCH "[A-Za-z]*Error[^\n]*" _why "${_probe_error}")
    atoll_configure_error("${ATOLL_TORCH_PYTHON} cannot import ${package} (${_why}); ${fix}")
  endif()
  string(REPLACE "\n" ";" _probe "${_probe}")
  set(${out} "${_probe}" PARENT_SCOPE)
endfunction()
