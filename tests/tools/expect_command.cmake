# ctest script: runs CMD (a ;-list), checks its exit status is RC and its output (stdout and stderr) matches REGEX.
#   cmake "-DCMD=<program;arg;...>" -DRC=<status> "-DREGEX=<regular expression>" -P expect_command.cmake
execute_process(COMMAND ${CMD} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc STREQUAL RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${RC}:\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}':\n${out}${err}")
endif()
