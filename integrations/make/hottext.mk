# hottext for make: lay out a program's hot functions from the profile its meta file names.
#
#   HOTTEXT_META := hottext/server.meta        # required: written by `hottext pipeline run`
#   include /path/to/hottext/integrations/make/hottext.mk
#   CFLAGS += $(HOTTEXT_CFLAGS)
#   server: $(OBJS) $(HOTTEXT_DEPS)
#   	$(hottext_link)
#
# $(hottext_link) links the prerequisites' objects and archives with $(LDFLAGS) and $(LDLIBS)
# twice over: a "probe" (unresolved symbols allowed: only names and code matter), then
# `hottext fetch --binary probe`, which fetches the profile by hash, checks it and writes the
# ordering input, then the real link with it. The probe is the real link without the ordering
# and the runtime, so it holds the code of static libraries (prerequisites, or -lNAME in LDLIBS).
# Last, `hottext verify --binary TARGET --planned INPUT`: every planned function in the hot
# range, which the runtime can map; if not, HOTTEXT_ON_MISSING=fail removes the target and fails,
# warn says so and keeps it.
# The target relinks when the meta file changes ($(HOTTEXT_DEPS)).
#
# HOTTEXT_CFLAGS must reach every object linked into the program, those of its static libraries
# too (CXXFLAGS for C++; pass them on to a sub-make that builds a library): a function compiled
# without -ffunction-sections cannot be moved, and the profile would find it gone.
#
# Settings (override before or after the include):
#   HOTTEXT             the hottext command                      (hottext)
#   HOTTEXT_LINKER      bfd | lld: linker script; gold: order file + markers object   (bfd)
#   HOTTEXT_ON_MISSING  fail | warn: no usable profile fails the build, or builds it
#                       unoptimised with a loud warning           (fail)
#   HOTTEXT_DIR         where the probe and the ordering input go (.hottext)
#   HOTTEXT_FETCH_ARGS  more `hottext fetch` options (--store URL, --min-matched FRACTION)
#   HOTTEXT_RUNTIME     none | static | auto: link the huge-page runtime (none)
#   HOTTEXT_RUNTIME_DIR the runtime's build/lib directory
#   HOTTEXT_CLUSTERS    (set it, and CC, before the include) a cluster file for clang's
#                       basic-block sections (`hottext order --format clang-bb-sections`):
#                       when $(CC) is clang, HOTTEXT_CFLAGS gets
#                       -fbasic-block-sections=list=FILE, which splits the blocks that never ran
#                       out of the hot functions (gcc has no such option: a warning, and
#                       the build goes on unsplit). Make the objects depend on it:
#                       $(OBJS): $(HOTTEXT_COMPILE_DEPS)

HOTTEXT ?= hottext
HOTTEXT_LINKER ?= bfd
HOTTEXT_ON_MISSING ?= fail
HOTTEXT_DIR ?= .hottext
HOTTEXT_FETCH_ARGS ?=
HOTTEXT_RUNTIME ?= none
HOTTEXT_RUNTIME_DIR ?=

ifndef HOTTEXT_META
$(error hottext.mk: set HOTTEXT_META to the service's meta file before including it)
endif

HOTTEXT_CFLAGS := -ffunction-sections -fno-omit-frame-pointer
HOTTEXT_CLUSTERS ?=
HOTTEXT_COMPILE_DEPS = $(HOTTEXT_CLUSTERS)
ifneq ($(HOTTEXT_CLUSTERS),)
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null)),)
HOTTEXT_CFLAGS += -fbasic-block-sections=list=$(HOTTEXT_CLUSTERS)
else
$(warning hottext.mk: HOTTEXT_CLUSTERS is for clang; $(CC) has no basic-block sections, so the hot functions stay whole)
endif
endif
# The meta file when it exists: a missing one is handled by --on-missing, not by make.
HOTTEXT_DEPS = $(wildcard $(HOTTEXT_META))

ifeq ($(HOTTEXT_LINKER),gold)
HOTTEXT_FORMAT := gold-order
HOTTEXT_INPUT = $(HOTTEXT_DIR)/$(notdir $@).order
HOTTEXT_MARKERS = $(HOTTEXT_DIR)/$(notdir $@).markers.o
HOTTEXT_LDFLAGS = -fuse-ld=gold -Wl,--section-ordering-file=$(HOTTEXT_INPUT) $(HOTTEXT_MARKERS)
else ifneq ($(filter bfd lld,$(HOTTEXT_LINKER)),)
HOTTEXT_FORMAT := ld-script
HOTTEXT_INPUT = $(HOTTEXT_DIR)/$(notdir $@).ld
HOTTEXT_MARKERS =
HOTTEXT_LDFLAGS = -Wl,-T,$(HOTTEXT_INPUT)
else
$(error hottext.mk: HOTTEXT_LINKER must be bfd, lld or gold)
endif

ifeq ($(HOTTEXT_RUNTIME),static)
HOTTEXT_LIBS = -L$(HOTTEXT_RUNTIME_DIR) -lhottext
else ifeq ($(HOTTEXT_RUNTIME),auto)
HOTTEXT_LIBS = -L$(HOTTEXT_RUNTIME_DIR) -lhottext_auto
else
HOTTEXT_LIBS =
endif

define hottext_link
	@mkdir -p $(HOTTEXT_DIR)
	$(CC) $(LDFLAGS) -o $(HOTTEXT_DIR)/$(notdir $@).probe $(filter %.o %.a,$^) $(LDLIBS) \
		-Wl,--unresolved-symbols=ignore-all
	$(HOTTEXT) fetch --meta $(HOTTEXT_META) --binary $(HOTTEXT_DIR)/$(notdir $@).probe \
		--format $(HOTTEXT_FORMAT) -o $(HOTTEXT_INPUT) \
		$(if $(HOTTEXT_MARKERS),--markers $(HOTTEXT_MARKERS)) \
		--on-missing $(HOTTEXT_ON_MISSING) $(HOTTEXT_FETCH_ARGS)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(HOTTEXT_LDFLAGS) $(LDLIBS) $(HOTTEXT_LIBS)
	@$(HOTTEXT) verify --binary $@ --planned $(HOTTEXT_INPUT) || \
		{ if [ $(HOTTEXT_ON_MISSING) = fail ]; then rm -f $@; \
		echo "hottext.mk: $@ does not hold the hot range $(HOTTEXT_INPUT) planned (see above); it was removed" >&2; exit 1; \
		else echo "hottext.mk: warning: $@ does not hold the hot range $(HOTTEXT_INPUT) planned (see above)" >&2; fi; }
endef
