; Outline patterns for C++. Captures: @definition.<kind> spans the definition, @name is its
; name. A qualified name (`ns::A<T>::f`) is split by the outline: `f` in parent `A`, a method.
; Free prototypes are left out; member declarations inside a class body are listed, since they
; are the class's outline when the bodies live in a .cpp file.

(function_definition
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
    (pointer_declarator
      declarator: (pointer_declarator
        declarator: (function_declarator declarator: (_) @name)))
    (reference_declarator (function_declarator declarator: (_) @name))
  ]) @definition.function

(field_declaration_list
  (field_declaration
    declarator: [
      (function_declarator declarator: (_) @name)
      (pointer_declarator declarator: (function_declarator declarator: (_) @name))
      (reference_declarator (function_declarator declarator: (_) @name))
    ]) @definition.method)

; Constructors and destructors declared in the class body.
(field_declaration_list
  (declaration declarator: (function_declarator declarator: (_) @name)) @definition.method)

(class_specifier name: (_) @name body: (field_declaration_list)) @definition.class

(struct_specifier name: (_) @name body: (field_declaration_list)) @definition.struct

(union_specifier name: (_) @name body: (field_declaration_list)) @definition.struct

(enum_specifier name: (_) @name body: (enumerator_list)) @definition.enum

(namespace_definition name: (_) @name) @definition.module

(type_definition declarator: (type_identifier) @name) @definition.type

(alias_declaration name: (type_identifier) @name) @definition.type

; Object-like macros with a value; include guards have none.
(preproc_def name: (identifier) @name value: (_)) @definition.constant

; `typedef int (*callback)(int);`
(type_definition
  declarator: (function_declarator
    declarator: (parenthesized_declarator
      (pointer_declarator declarator: (type_identifier) @name)))) @definition.type
