# `cmake --install` into a fresh prefix, then the installed binary run from a folder without the source tree's
# scenarios: `servesim list`, the default scenario (share/servesim/scenarios/quickstart.yaml) and `--plot` (the
# installed share/servesim/servesim_plot.py). Run by ctest as the `install` test: cmake -DBUILD=... -DPREFIX=... -P.
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${PREFIX}" RESULT_VARIABLE rc
                OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
set(bin "${PREFIX}/bin/servesim")
execute_process(COMMAND "${bin}" list WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "Qwen3-4B +Qwen/Qwen3-4B")
  message(FATAL_ERROR "installed servesim list: rc ${rc}, output:\n${out}")
endif()
execute_process(COMMAND "${bin}" run --format csv WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "Qwen3.5-4B")
  message(FATAL_ERROR "installed servesim run (default scenario): rc ${rc}\n${err}")
endif()
execute_process(COMMAND "${bin}" run --model Qwen3-4B --num-prompts 5 --out "${PREFIX}/o" --plot
                WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS "${PREFIX}/o/latency.png" OR NOT EXISTS "${PREFIX}/o/timeseries.png")
  message(FATAL_ERROR "installed servesim run --plot: rc ${rc}\n${err}")
endif()
file(REMOVE_RECURSE "${PREFIX}")
