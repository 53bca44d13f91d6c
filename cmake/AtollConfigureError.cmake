# atoll_configure_error(TEXT): stops configure with one "Atoll: TEXT" line naming what was found and
# the fix. One unwrapped line (CMake word-wraps FATAL_ERROR text), then the stop.
macro(atoll_configure_error text)
  message(NOTICE "Atoll: ${text}")
  message(FATAL_ERROR "configure stopped: see the 'Atoll:' line above")
endmacro()
