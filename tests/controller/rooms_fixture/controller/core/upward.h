// Fixture of controller.rooms.upward_include_is_refused: core may include no
// other room, so the include of api/ below must be refused.
#pragma once
#include "controller/api/allowed.h"
#include "controller/core/own.h"
