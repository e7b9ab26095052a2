/* Input of build.rs's bindgen run: the aclnn phase-1 declarations the L2 interposer wraps.
 * build.rs defines MSPROBE_USE_CANN_HEADERS and adds the CANN include directory when CANN
 * headers are installed (ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH); otherwise the declarations
 * bundled with the project are used. */
#ifdef MSPROBE_USE_CANN_HEADERS
#include <aclnn/acl_meta.h>
#include <aclnnop/aclnn_ops.h>
#else
#include "include/cann/aclnn_ops.h"
#endif
