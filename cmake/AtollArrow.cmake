# Finds Apache Arrow's and Parquet's C++ libraries inside the pyarrow wheel, as AtollTorch.cmake finds
# LibTorch inside the torch wheel: the same interpreter (ATOLL_TORCH_PYTHON, .venv's by default) says
# where the wheel keeps its headers and libraries (libarrow.so.N00, libparquet.so.N00). Defines the
# imported target atoll_arrow (Parquet input of `atoll data prepare`, runtime/data/parquet_documents.*).
# Every way this can go wrong stops configure with one line naming what was found and the fix.

set(_fix "run: bash scripts/install-deps.sh (pyarrow is pinned in scripts/requirements.txt)")
include(AtollPythonProbe)
atoll_python_probe(_probe pyarrow
  "import pyarrow; print(pyarrow.__version__); print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0])"
  "${_fix}")
list(GET _probe 0 ATOLL_ARROW_VERSION)
list(GET _probe 1 _arrow_include)
list(GET _probe 2 _arrow_libdir)
string(REGEX MATCH "^[0-9]+" _arrow_major "${ATOLL_ARROW_VERSION}")
set(_arrow_so "${_arrow_libdir}/libarrow.so.${_arrow_major}00")
set(_parquet_so "${_arrow_libdir}/libparquet.so.${_arrow_major}00")
foreach(_file "${_arrow_include}/parquet/arrow/reader.h" "${_arrow_so}" "${_parquet_so}")
  if(NOT EXISTS "${_file}")
    atoll_configure_error("pyarrow ${ATOLL_ARROW_VERSION} at ${_arrow_libdir} has no ${_file}; ${_fix}")
  endif()
endforeach()

add_library(atoll_arrow_core SHARED IMPORTED)
set_target_properties(atoll_arrow_core PROPERTIES IMPORTED_LOCATION "${_arrow_so}"
                      INTERFACE_INCLUDE_DIRECTORIES "${_arrow_include}")
add_library(atoll_arrow SHARED IMPORTED)
set_target_properties(atoll_arrow PROPERTIES IMPORTED_LOCATION "${_parquet_so}"
                      INTERFACE_LINK_LIBRARIES atoll_arrow_core)
message(STATUS "Atoll: Arrow/Parquet ${ATOLL_ARROW_VERSION} from ${_arrow_libdir}")
