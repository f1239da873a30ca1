// The intensity sources of `zone:` regions (intensity_sources.cpp), built
// on carbon/'s providers and forecasters from the carbon source file
// (config_files.h), and the names of carbon/'s forecasters and hardware
// profiles the configuration files are checked against.
#pragma once

// config_files.h brings CarbonSourceConfig, IntensitySource (regions.h) and
// the forward declarations of carbon::Catalog and carbon::Forecaster.
#include "controller/config/config_files.h"

namespace controller {

// The intensity source the configuration names, built on carbon/'s providers
// (file: carbon::Catalog replayed; carbon-aware-sdk / electricitymaps: the
// HTTP provider behind a carbon::StaleFallbackProvider, fetched at most every
// refresh_seconds per zone and cached in between; a failed refresh keeps the
// last forecast's future hours). Throws std::runtime_error naming the file
// and key (e.g. a data_dir that does not hold the data); nullptr when built
// without carbon/.
std::unique_ptr<IntensitySource> make_intensity_source(const CarbonSourceConfig& config);

// source: file. The catalog's series, laid end to end (period = its length)
// with every recorded step at its own time: inside the recorded range times
// are used as they are, outside it the same step of the recording is
// replayed. Each zone is served at its series' step (hourly, or 5-, 15- or
// 30-minute: Catalog). forecast(zone, now_ms, horizon_h) returns the points
// at that step from floor_to_step(now) through the hour horizon_h after
// floor_hour(now) (horizon_h + 1 hourly points on hourly data; 2 x
// (horizon_h + 1) half hours when now is in the first half of an hour on
// 30-minute data, one fewer in the second): the values of
// carbon::forecast_series(*forecaster, replayed, now, n) (equal to it on
// catalog.series(zone) wherever that is defined). A forecaster named
// perfect* is given the replayed future too; every other one only the
// history it needs before floor_to_step(now) (it cannot see the future).
// current() is the replayed value in force (its step's); stats() the
// forecaster's name and live error per zone (against the value in force at
// each target hour's start). make_intensity_source (source: file) and
// make_carbon_intensity_source() (below: shipped data, blend) build
// through this. Throws std::runtime_error when forecaster is null.
std::unique_ptr<IntensitySource> make_file_intensity_source(carbon::Catalog catalog,
                                                            std::shared_ptr<const carbon::Forecaster> forecaster);

// "" when `spec` names a carbon::make_forecaster forecaster, else the error
// (listing the names).
std::string forecaster_spec_error(const std::string& spec);

// carbon/'s shipped data (source: file, forecaster blend; see
// config_files.h) (nullptr when built without carbon/).
std::unique_ptr<IntensitySource> make_carbon_intensity_source();

// carbon/'s built-in hardware profile names (empty when built without carbon/).
std::vector<std::string> known_hardware_profiles();

}  // namespace controller
