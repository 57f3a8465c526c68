# install.mk — `make install`, `make uninstall`, the man page and the systemd
# unit. Included by the Makefile.
#
#   make man          build/unclog.1, from man/unclog.1.in and `build/unclog --help`
#   make install      binary, man page, configuration, example site, unit
#   make uninstall    removes exactly what install laid down
#
# PREFIX=/usr/local and DESTDIR= by default: `make install DESTDIR=/tmp/pkg
# PREFIX=/usr` stages a package. BINDIR, MANDIR, SYSCONFDIR (/etc for
# PREFIX=/usr), DATADIR and UNITDIR may each be set too. install builds
# build/unclog if needed, and nothing when all is up to date.

PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr /usr/,$(PREFIX)),/etc,$(PREFIX)/etc)
DATADIR    ?= $(PREFIX)/share
UNITDIR    ?= $(PREFIX)/lib/systemd/system
INSTALL    ?= install

# The example site: every file under static/, as paths relative to it.
STATIC_FILES := $(shell cd static 2>/dev/null && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
# Its subdirectories, deepest first (for uninstall's rmdir).
STATIC_DIRS  := $(shell cd static 2>/dev/null && find . -mindepth 1 -type d \
                  | sed 's|^\./||' | LC_ALL=C sort -r)

I_CONF   := $(DESTDIR)$(SYSCONFDIR)/unclog/unclog.conf
I_SHARE  := $(DESTDIR)$(DATADIR)/unclog
I_STATIC := $(I_SHARE)/static

.PHONY: man install uninstall install-dirs-force
man: build/unclog.1

# The directories written into the man page and the unit. This file changes
# only when they do, so that `make install PREFIX=/usr` after a build for
# /usr/local remakes both, and an unchanged setting remakes nothing.
INSTALL_DIRS := BINDIR=$(BINDIR) SYSCONFDIR=$(SYSCONFDIR) DATADIR=$(DATADIR) UNITDIR=$(UNITDIR)
build/install-dirs: install-dirs-force
	@mkdir -p build
	@echo '$(INSTALL_DIRS)' | cmp -s - $@ || echo '$(INSTALL_DIRS)' > $@
install-dirs-force: ;

SUBST_DIRS := -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
              -e 's|@DATADIR@|$(DATADIR)|g' -e 's|@UNITDIR@|$(UNITDIR)|g'

# The man page: the template plus the options and keys of --help (man/mkman.sh).
build/unclog.1: man/unclog.1.in man/mkman.sh build/unclog build/install-dirs
	@echo "  MAN     $@"
	@sh man/mkman.sh build/unclog man/unclog.1.in > $@.tmp && sed -i $(SUBST_DIRS) $@.tmp \
	    && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }

build/unclog.service: conf/unclog.service.in build/install-dirs
	@echo "  GEN     $@"
	@sed $(SUBST_DIRS) conf/unclog.service.in > $@.tmp && mv $@.tmp $@ \
	    || { rm -f $@.tmp; exit 1; }

# An existing configuration that differs from conf/unclog.conf was edited by
# someone: install keeps it and uninstall leaves it.
install: build/unclog build/unclog.1 build/unclog.service
	@echo "  INSTALL $(DESTDIR)$(BINDIR)/unclog"
	@$(INSTALL) -D -m 755 build/unclog $(DESTDIR)$(BINDIR)/unclog
	@echo "  INSTALL $(DESTDIR)$(MANDIR)/man1/unclog.1"
	@$(INSTALL) -D -m 644 build/unclog.1 $(DESTDIR)$(MANDIR)/man1/unclog.1
	@echo "  INSTALL $(DESTDIR)$(UNITDIR)/unclog.service"
	@$(INSTALL) -D -m 644 build/unclog.service $(DESTDIR)$(UNITDIR)/unclog.service
	@if [ -e '$(I_CONF)' ] && ! cmp -s conf/unclog.conf '$(I_CONF)'; then \
	    echo "  KEEP    $(I_CONF) (edited; the shipped one is conf/unclog.conf)"; \
	else \
	    echo "  INSTALL $(I_CONF)"; \
	    $(INSTALL) -D -m 644 conf/unclog.conf '$(I_CONF)'; \
	fi
	@echo "  INSTALL $(I_STATIC)/ ($(words $(STATIC_FILES)) files)"
	@for f in $(STATIC_FILES); do \
	    $(INSTALL) -D -m 644 "static/$$f" "$(I_STATIC)/$$f" || exit 1; \
	done
ifeq ($(DESTDIR),)
	@echo "  then:   systemctl daemon-reload && systemctl enable --now unclog"
endif

# Then the directories install created, if nothing else is left in them.
uninstall:
	@echo "  RM      $(DESTDIR)$(BINDIR)/unclog $(DESTDIR)$(MANDIR)/man1/unclog.1"
	@rm -f $(DESTDIR)$(BINDIR)/unclog $(DESTDIR)$(MANDIR)/man1/unclog.1
	@echo "  RM      $(DESTDIR)$(UNITDIR)/unclog.service"
	@rm -f $(DESTDIR)$(UNITDIR)/unclog.service
	@if [ -e '$(I_CONF)' ] && ! cmp -s conf/unclog.conf '$(I_CONF)'; then \
	    echo "  KEEP    $(I_CONF) (edited)"; \
	else \
	    echo "  RM      $(I_CONF)"; \
	    rm -f '$(I_CONF)'; \
	fi
	@echo "  RM      $(I_STATIC)/ ($(words $(STATIC_FILES)) files)"
	@for f in $(STATIC_FILES); do rm -f "$(I_STATIC)/$$f" || exit 1; done
	@for d in $(addprefix '$(I_STATIC)/,$(addsuffix ',$(STATIC_DIRS))) '$(I_STATIC)' \
	          '$(I_SHARE)' '$(DESTDIR)$(SYSCONFDIR)/unclog'; do \
	    if [ -d "$$d" ]; then rmdir "$$d" 2>/dev/null || echo "  KEEP    $$d/ (not empty)"; fi; \
	done
