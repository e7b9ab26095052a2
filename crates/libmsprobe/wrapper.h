/* Input of build.rs's bindgen run (crates/aclnn-gen) when no CANN is installed: the aclnn
 * phase-1 declarations bundled with the project. With an installed CANN (ASCEND_TOOLKIT_HOME /
 * ASCEND_HOME_PATH) this file is not used: the generator writes an umbrella header including
 * aclnn/acl_meta.h and every aclnnop/*.h of that CANN instead. */
#include "include/cann/aclnn_ops.h"
