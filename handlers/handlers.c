/* The handler modules, in the order their routes are matched: the static
 * files' fallback route comes last. main() hands this list to the core; the
 * tests that need every configuration key read it too. */
#include "handlers/handlers.h"

#include "handlers/gzip.h"
#include "handlers/observe/dashboard.h"
#include "handlers/observe/settings.h"
#include "handlers/observe/stats.h"
#include "handlers/files/files.h"

const struct module *const handler_modules[] = {
    &gzip_module, &stats_module, &settings_module, &dashboard_module, &files_module, NULL,
};
