// Fixture: api may include core (allowed).
#pragma once
#include "controller/core/own.h"
