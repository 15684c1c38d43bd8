// The slice of NVIDIA's DCGM C API that aegis uses, declared by hand (no DCGM header ships
// in Debian), from NVIDIA's public dcgm_agent.h, dcgm_structs.h and dcgm_fields.h (DCGM
// 3.x and 4.x agree on all of it). Shared by the dlopen loader (function-pointer types)
// and the emulated libdcgm (which defines the functions).
#pragma once
#include <cstdint>

namespace aegis::dcgm {

// dcgmReturn_t: 0 is success, errors are negative.
using dcgmReturn_t = int;
inline constexpr dcgmReturn_t DCGM_ST_OK = 0;
inline constexpr dcgmReturn_t DCGM_ST_BADPARAM = -1;
inline constexpr dcgmReturn_t DCGM_ST_GENERIC_ERROR = -3;
inline constexpr dcgmReturn_t DCGM_ST_NOT_SUPPORTED = -6;
inline constexpr dcgmReturn_t DCGM_ST_INIT_ERROR = -7;
inline constexpr dcgmReturn_t DCGM_ST_UNINITIALIZED = -10;
inline constexpr dcgmReturn_t DCGM_ST_NO_DATA = -14;
inline constexpr dcgmReturn_t DCGM_ST_NOT_WATCHED = -16;
inline constexpr dcgmReturn_t DCGM_ST_CONNECTION_NOT_VALID = -21;
inline constexpr dcgmReturn_t DCGM_ST_MAX_LIMIT = -24;
inline constexpr dcgmReturn_t DCGM_ST_PROFILING_NOT_SUPPORTED = -36;

// Handles are integers the library hands out.
using dcgmHandle_t = std::uintptr_t;
using dcgmGpuGrp_t = std::uintptr_t;
using dcgmFieldGrp_t = std::uintptr_t;

inline constexpr int DCGM_OPERATION_MODE_AUTO = 1;  // the embedded engine samples on its own threads
inline constexpr int DCGM_GROUP_EMPTY = 1;           // dcgmGroupType_t
inline constexpr dcgmGpuGrp_t DCGM_GROUP_ALL_GPUS = 0x7fffffff;
inline constexpr int DCGM_MAX_NUM_DEVICES = 32;
inline constexpr int DCGM_FE_GPU = 1;  // dcgm_field_entity_group_t

// Field ids (dcgm_fields.h).
inline constexpr unsigned short DCGM_FI_DEV_UUID = 54;
inline constexpr unsigned short DCGM_FI_PROF_SM_ACTIVE = 1002;     // ratio of cycles an SM has a warp resident
inline constexpr unsigned short DCGM_FI_PROF_SM_OCCUPANCY = 1003;  // resident warps / maximum, per SM
inline constexpr unsigned short DCGM_FI_PROF_DRAM_ACTIVE = 1005;   // ratio of cycles the memory interface is busy

// Field value types (dcgm_fields.h: DCGM_FT_*).
inline constexpr unsigned short DCGM_FT_DOUBLE = 'd';
inline constexpr unsigned short DCGM_FT_INT64 = 'i';
inline constexpr unsigned short DCGM_FT_STRING = 's';

// Doubles at or above this are "blank" (no data, not supported, no permission).
inline constexpr double DCGM_FP64_BLANK = 140737488355328.0;
inline constexpr int DCGM_MAX_STR_LENGTH = 256;
inline constexpr int DCGM_MAX_BLOB_LENGTH = 4096;

// dcgmFieldValue_v1.
struct dcgmFieldValue_v1 {
  unsigned int version;
  unsigned short fieldId;
  unsigned short fieldType;
  int status;
  std::int64_t ts;  // microseconds since 1970
  union {
    std::int64_t i64;
    double dbl;
    char str[DCGM_MAX_STR_LENGTH];
    char blob[DCGM_MAX_BLOB_LENGTH];
  } value;
};

// dcgmConnectV2Params_v2.
struct dcgmConnectV2Params_v2 {
  unsigned int version;
  unsigned int persistAfterDisconnect;  // 0: the host engine drops our watches when we go
  unsigned int timeoutMs;
  unsigned int addressIsUnixSocket;
};

// MAKE_DCGM_VERSION(type, ver): the struct's size with the version in the top byte.
constexpr unsigned int make_version(unsigned int size, unsigned int ver) { return size | (ver << 24U); }
inline constexpr unsigned int dcgmFieldValue_version1 = make_version(sizeof(dcgmFieldValue_v1), 1);
inline constexpr unsigned int dcgmConnectV2Params_version2 = make_version(sizeof(dcgmConnectV2Params_v2), 2);

extern "C" {
using dcgmInit_fn = dcgmReturn_t (*)();
using dcgmShutdown_fn = dcgmReturn_t (*)();
using dcgmStartEmbedded_fn = dcgmReturn_t (*)(int opMode, dcgmHandle_t* handle);
using dcgmStopEmbedded_fn = dcgmReturn_t (*)(dcgmHandle_t handle);
using dcgmConnect_v2_fn = dcgmReturn_t (*)(const char* ipAddress, dcgmConnectV2Params_v2* params, dcgmHandle_t* handle);
using dcgmDisconnect_fn = dcgmReturn_t (*)(dcgmHandle_t handle);
using errorString_fn = const char* (*)(dcgmReturn_t result);
using dcgmGetAllSupportedDevices_fn = dcgmReturn_t (*)(dcgmHandle_t handle, unsigned int* gpuIdList, int* count);
using dcgmGroupCreate_fn = dcgmReturn_t (*)(dcgmHandle_t handle, int type, const char* name, dcgmGpuGrp_t* group);
using dcgmGroupDestroy_fn = dcgmReturn_t (*)(dcgmHandle_t handle, dcgmGpuGrp_t group);
using dcgmGroupAddDevice_fn = dcgmReturn_t (*)(dcgmHandle_t handle, dcgmGpuGrp_t group, unsigned int gpuId);
using dcgmFieldGroupCreate_fn = dcgmReturn_t (*)(dcgmHandle_t handle, int numFieldIds, unsigned short* fieldIds,
                                                 const char* name, dcgmFieldGrp_t* fieldGroup);
using dcgmFieldGroupDestroy_fn = dcgmReturn_t (*)(dcgmHandle_t handle, dcgmFieldGrp_t fieldGroup);
using dcgmWatchFields_fn = dcgmReturn_t (*)(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t fieldGroup,
                                            long long updateFreqUs, double maxKeepAgeS, int maxKeepSamples);
using dcgmUnwatchFields_fn = dcgmReturn_t (*)(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t fieldGroup);
using dcgmUpdateAllFields_fn = dcgmReturn_t (*)(dcgmHandle_t handle, int waitForUpdate);
using dcgmEntityGetLatestValues_fn = dcgmReturn_t (*)(dcgmHandle_t handle, int entityGroup, int entityId,
                                                      unsigned short* fieldIds, unsigned int count,
                                                      dcgmFieldValue_v1* values);
}

}  // namespace aegis::dcgm
