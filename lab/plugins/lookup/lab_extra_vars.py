"""The variables given on this run's command line (-e), as given.

Validation needs to tell a name a user passed with -e from one the lab's
inventory defines: a -e of a name the lab sets itself (lab_profile,
lab_repo_dir, ...) would silently override it, since extra vars win over
everything.
"""

DOCUMENTATION = """
    name: lab_extra_vars
    short_description: the run's extra vars (-e), raw (not templated)
    description: Parses the command line's -e arguments as ansible-playbook does and returns one dict of their raw values.
"""

from ansible import context
from ansible.plugins.lookup import LookupBase
from ansible.utils.vars import load_extra_vars


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if not context.CLIARGS.get("extra_vars"):
            return [{}]
        # raw values: validation refuses a Jinja expression or a control
        # character in one (templating would hide both)
        return [dict(load_extra_vars(self._loader))]
