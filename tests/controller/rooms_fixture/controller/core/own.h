// Fixture: a room's own header (allowed).
#pragma once
