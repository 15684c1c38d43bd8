// Placeholder: implemented with the feature.
#include "estimate/learned.h"
