"""The profile's defaults, from its one declaration (lab/profile.yml).

Gives group "all" the default of every declared variable, so a run, a test
or a user's own inventory sees the same defaults; -e, presets and
inventories override them as usual. Validation (playbooks/validate.yml)
checks whatever values win against the same declaration.
"""

DOCUMENTATION = """
    name: lab_profile
    short_description: the pciehp-lab profile's defaults from lab/profile.yml
    description: Loads the default of every variable lab/profile.yml declares into group all.
    options:
      stage:
        ini:
          - key: stage
            section: vars_lab_profile
        env:
          - name: ANSIBLE_VARS_PLUGIN_STAGE
    extends_documentation_fragment:
      - vars_plugin_staging
"""

import os

import yaml
from ansible.inventory.group import Group
from ansible.plugins.vars import BaseVarsPlugin

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profile.yml")


class VarsModule(BaseVarsPlugin):
    REQUIRES_ENABLED = True
    _defaults = None

    def get_vars(self, loader, path, entities, cache=True):
        if not isinstance(entities, list):
            entities = [entities]
        super().get_vars(loader, path, entities)
        if not any(isinstance(e, Group) and e.name == "all" for e in entities):
            return {}
        if VarsModule._defaults is None or not cache:
            with open(SCHEMA, encoding="utf-8") as f:
                schema = yaml.safe_load(f)
            VarsModule._defaults = {n: s.get("default") for n, s in schema["variables"].items()}
        return dict(VarsModule._defaults)
