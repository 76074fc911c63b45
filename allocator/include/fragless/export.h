/* FRAGLESS_API marks the symbols libfragless exports; everything else is hidden. */
#ifndef FRAGLESS_EXPORT_H
#define FRAGLESS_EXPORT_H
#if defined(FRAGLESS_BUILDING_LIBRARY)
#define FRAGLESS_API __attribute__((visibility("default")))
#else
#define FRAGLESS_API
#endif
#endif
