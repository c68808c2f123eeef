# Warning policy for the project's own targets: -Wall -Wextra everywhere, and
# -Werror when FEDAGG_WERROR is ON (the ci preset and scripts/test.sh under CI).
option(FEDAGG_WERROR "Treat warnings in fedagg's own code as errors" OFF)

function(fedagg_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
  if(FEDAGG_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                              $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endfunction()
