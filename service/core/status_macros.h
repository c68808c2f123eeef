// Error-propagation macros for absl::Status / absl::StatusOr.
// The packaged Abseil (20220623) has no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so fedagg
// defines its own, prefixed FEDAGG_ to stay clear of any later Abseil versions.
#ifndef FEDAGG_SERVICE_CORE_STATUS_MACROS_H_
#define FEDAGG_SERVICE_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FEDAGG_STATUS_CONCAT_INNER(a, b) a##b
#define FEDAGG_STATUS_CONCAT(a, b) FEDAGG_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define FEDAGG_RETURN_IF_ERROR(expr)                         \
  do {                                                       \
    if (::absl::Status fedagg_status_ = (expr); !fedagg_status_.ok()) \
      return fedagg_status_;                                 \
  } while (false)

// `lhs = value of expr` when expr (an absl::StatusOr<T>) is OK; returns its status otherwise.
#define FEDAGG_ASSIGN_OR_RETURN(lhs, expr)                                          \
  FEDAGG_ASSIGN_OR_RETURN_IMPL(FEDAGG_STATUS_CONCAT(fedagg_statusor_, __LINE__), lhs, expr)

#define FEDAGG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#endif  // FEDAGG_SERVICE_CORE_STATUS_MACROS_H_
